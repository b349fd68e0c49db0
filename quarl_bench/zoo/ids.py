"""Names of where agents come from, importable without torch: the forms an agent is stored in (what a row's algo
says for a policy that is no SB3 agent), and the Control Suite's env prefix."""

from __future__ import annotations

from dataclasses import dataclass

DMC_PREFIX = "dmc/"  # the Control Suite's tasks as flat-observation gymnasium envs (zoo/dmc.py)


@dataclass(frozen=True)
class StoredForm:
    """How an agent of one kind is stored, and so loaded, saved and fine-tuned: the facts stages ask instead of its
    kind's name.

    :param sb3_model: an SB3 model zip (an RL algorithm's: its loss, its saved hyperparameters and normalisation
        stats beside it); otherwise a user's torch module or ONNX graph, with no RL algorithm.
    :param module_file: a torch module given as a Python function (``--policy-module``), written back as one.
    :param graph: an ONNX graph, fine-tuned only through its torch twin.
    """

    sb3_model: bool = True
    module_file: bool = False
    graph: bool = False

    @property
    def suffix(self) -> str:
        """The file a saved agent of this form is: an SB3 zip, or an ONNX graph (a torch module is written as one)."""
        return ".zip" if self.sb3_model else ".onnx"


# What a row's algo says for a policy that is no SB3 agent: a user's torch module or ONNX graph.
FOREIGN_FORMS = {"torch-module": StoredForm(False, module_file=True), "onnx": StoredForm(False, graph=True)}
SB3_FORM = StoredForm()


def stored_form(algo: str) -> StoredForm:
    """The form an agent of row algo ``algo`` is stored in."""
    return FOREIGN_FORMS.get(algo, SB3_FORM)
