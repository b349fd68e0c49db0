"""ActorQ: an fp32 learner, a parameter quantizer and actors that collect experience with int8/fp16 policies."""
