"""The papers behind the recipes, as data: a recipe Config's paper default in one line (``paper_default``) and a
trainer's paper with its BibTeX citation (``paper``), rendered in TRL's citation layout."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def paper_default(default: Any, help: str) -> Any:
    """A Config field whose default is the paper's, with its help string (every Config field has one, as in TRL)."""
    return field(default=default, metadata={"help": help})


def paper(
    title: str,
    arxiv_id: str,
    key: str,
    authors: str,
    year: int,
    entry: str = "article",
    eprint: bool = True,
    **more: str,
) -> dict[str, str]:
    """``{"title", "id", "citation"}`` of a paper, for a trainer's model card; ``more`` are further BibTeX fields
    (booktitle, pages) written after the year, and ``eprint=False`` leaves the arXiv eprint out of the citation."""
    fields = {"title": f"{{{{{title}}}}}", "author": f"{{{authors}}}", "year": str(year)}
    fields.update({name: f"{{{value}}}" for name, value in more.items()})
    if eprint:
        fields["eprint"] = f"{{arXiv:{arxiv_id}}}"
    lines = [f"@{entry}{{{key},", *(f"    {name:<13}= {value}," for name, value in fields.items()), "}"]
    return {"title": title, "id": arxiv_id, "citation": "\n".join(lines)}


@dataclass(frozen=True)
class RecipeCard:
    """How a trainer names itself: the recipe's name on its model card and in the logs, the Hub tags of the models it
    trains, and its paper (``paper(...)``: title, arXiv id and BibTeX citation; empty for none)."""

    name: str
    tags: tuple[str, ...] = ()
    paper: dict[str, str] = field(default_factory=dict)
