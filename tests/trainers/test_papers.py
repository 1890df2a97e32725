"""Recipe papers as data: a citation rendered in TRL's BibTeX layout, and the defaults all paper recipes share."""

import dataclasses

import pytest

from trl_ext.recipes import REGISTRY
from trl_ext.trainers.grpo import GRPOConfig, PaperGRPOConfig
from trl_ext.trainers.papers import paper, paper_default


def test_paper_renders_trls_citation_layout():
    rendered = paper("A Title", "2401.00001", "doe2024title", "Jane Doe and John Roe", 2024, entry="inproceedings",
                     booktitle="Proc. X", pages="1--2")  # fmt: skip
    assert rendered["title"] == "A Title" and rendered["id"] == "2401.00001"
    assert rendered["citation"].splitlines() == [
        "@inproceedings{doe2024title,",
        "    title        = {{A Title}},",
        "    author       = {Jane Doe and John Roe},",
        "    year         = 2024,",
        "    booktitle    = {Proc. X},",
        "    pages        = {1--2},",
        "    eprint       = {arXiv:2401.00001},",
        "}",
    ]
    assert "eprint" not in paper("T", "1", "k", "A", 2020, eprint=False)["citation"]


def test_paper_default_carries_a_help_string():
    @dataclasses.dataclass
    class Config:
        beta: float = paper_default(0.5, "KL coefficient.")

    (field,) = dataclasses.fields(Config)
    assert Config().beta == 0.5 and field.metadata["help"] == "KL coefficient."


@pytest.mark.parametrize("recipe", ["dapo", "dr_grpo", "rloo", "prorl", "magistral"])
def test_paper_recipes_share_the_paper_base_and_document_every_field_they_set(recipe):
    config_cls, trainer_cls = REGISTRY[recipe].classes()
    assert issubclass(config_cls, PaperGRPOConfig)
    own = {name for name in vars(config_cls)["__annotations__"]}
    assert own and not own & {"lr_scheduler_type", "vllm_importance_sampling_correction"}  # set once, in the base
    for field in dataclasses.fields(config_cls):
        assert field.metadata.get("help"), field.name
    assert trainer_cls.recipe_card.paper["id"] in trainer_cls.recipe_card.paper["citation"]
    assert {f.name for f in dataclasses.fields(GRPOConfig)} == {f.name for f in dataclasses.fields(config_cls)}
