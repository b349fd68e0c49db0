"""Methods: one config class per method and a handler registered for it (``protocol.py``).

``ptq`` and ``deploy`` evaluate an existing agent; ``qat`` and ``amp`` train one first (or find it trained in the
cache); ``rollout`` and ``actorq`` runs make their own agent; ``fidelity`` stores side rows; certification is a
driver over ordinary PTQ jobs (``certify/driver.py``). Evaluating an agent is shared
(``agent_evaluation.AgentEvaluation``). A new method is one module: its config, its handler,
``@register(ItsConfig)``, and its line in ``registry.METHODS``.
"""
