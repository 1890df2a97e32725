"""Model cards, training plots, evaluation results in cards, and Hub uploads."""

from trl_ext.hub.cards import (
    CARD_TEMPLATE,
    NOT_HYPERPARAMETERS,
    SUMMARY_METRICS,
    TRL_CITATION,
    ModelCardMixin,
    card_context,
    changed_hyperparameters,
    final_metrics,
    render_model_card,
    versions,
    write_model_card,
)
from trl_ext.hub.eval_results import EVAL_RESULTS_FILE, add_eval_results_to_card, load_eval_results
from trl_ext.hub.plots import PLOT_FILE, PLOTTED_METRICS, plot_training_curves
from trl_ext.hub.push import TOP_LEVEL_IGNORE, HubPushError, checkpoint_folders, push_folder

__all__ = [
    "CARD_TEMPLATE",
    "EVAL_RESULTS_FILE",
    "NOT_HYPERPARAMETERS",
    "PLOTTED_METRICS",
    "PLOT_FILE",
    "SUMMARY_METRICS",
    "TOP_LEVEL_IGNORE",
    "TRL_CITATION",
    "HubPushError",
    "ModelCardMixin",
    "add_eval_results_to_card",
    "card_context",
    "changed_hyperparameters",
    "checkpoint_folders",
    "final_metrics",
    "load_eval_results",
    "plot_training_curves",
    "push_folder",
    "render_model_card",
    "versions",
    "write_model_card",
]
