"""trl_ext: paper-exact RL recipes for reasoning models on top of Hugging Face TRL."""

__version__ = "0.1.0"
