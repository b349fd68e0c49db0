"""A recurrent policy's state at low precision (``--state-bits``): the actor's LSTM rounds its hidden and cell
state after every step, as a device holding the state in P-bit registers between steps would.

sb3-contrib runs a whole sequence in one LSTM call where no episode starts in it (training, distillation); the
quantized LSTM steps through such a sequence one step at a time so every intermediate state is rounded too. The
hidden and cell state get one calibrated range each (per tensor, as ``--act-bits``), from the Markov states the
fp32 policy visits (:mod:`quarl_bench.families.recurrent`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from quarl_bench.errors import QuarlError
from quarl_bench.quant.activations import Range, calibrate, quantize_activation


class StateQuantizedLSTM(nn.LSTM):
    """An ``nn.LSTM`` whose hidden and cell state are rounded to ``precision`` after every step (sequence-first
    input, as sb3-contrib calls it); the output is the rounded hidden state of the last layer."""

    def quantize_state(self, precision: str, hidden: Range, cell: Range) -> None:
        self.state_precision, self.hidden_range, self.cell_range = precision, hidden, cell

    def forward(self, input, hx=None):  # noqa: A002  (nn.LSTM's own signature)
        outputs, state = [], hx
        for step in range(input.shape[0]):
            _, (h, c) = super().forward(input[step : step + 1], state)
            h = quantize_activation(h, self.state_precision, self.hidden_range)
            c = quantize_activation(c, self.state_precision, self.cell_range)
            outputs.append(h[-1:])
            state = (h, c)
        return torch.cat(outputs), state


def install_state_quantizer(policy: nn.Module, spec_state_bits: str, method: str, states: np.ndarray) -> str:
    """Replace ``policy``'s actor LSTM by a :class:`StateQuantizedLSTM` calibrated on the Markov ``states``; returns
    what was quantized.

    :raises QuarlError: for a policy without recurrent state.
    """
    from quarl_bench.families import family_of
    from quarl_bench.families.recurrent import is_recurrent, unpack

    lstm = family_of(policy).state_lstm(policy)
    if lstm is None:
        raise QuarlError(
            f"--state-bits {spec_state_bits}: this policy carries no recurrent state (expected a recurrent policy: "
            "ppo_lstm)"
        )
    assert is_recurrent(policy)  # it carries an LSTM state
    _, (hidden, cell) = unpack(policy, states)
    quantized = StateQuantizedLSTM(
        lstm.input_size, lstm.hidden_size, lstm.num_layers, bias=lstm.bias, batch_first=lstm.batch_first
    ).to(next(lstm.parameters()).device)
    quantized.load_state_dict(lstm.state_dict())
    quantized.quantize_state(
        spec_state_bits,
        calibrate(torch.as_tensor(hidden).float(), spec_state_bits, method, False),
        calibrate(torch.as_tensor(cell).float(), spec_state_bits, method, False),
    )
    policy.lstm_actor = quantized  # a shared LSTM's critic reads the same attribute
    return f"lstm_actor state (h, c): {spec_state_bits}"
