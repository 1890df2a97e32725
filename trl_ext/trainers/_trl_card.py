"""TRL's trainers tag the model they train with their class attribute ``_tag_names`` (each TRL trainer's ``__init__``
calls ``self.model.add_model_tags(self._tag_names)``). trl_ext's trainers name themselves with a public
``recipe_card`` instead; this mixin hands its tags to TRL. TRL's other card attributes (``_name``, ``_paper``) are read
only by TRL's ``create_model_card``, which ``trl_ext.hub.ModelCardMixin`` replaces. Guarded in test_trl_guards.py."""

from __future__ import annotations


class RecipeTagsMixin:
    """Gives TRL ``recipe_card.tags`` wherever it reads ``_tag_names``."""

    @property
    def _tag_names(self) -> list[str]:
        return list(self.recipe_card.tags)
