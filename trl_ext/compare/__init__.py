"""`trl-ext compare`: train several recipes on the same task and budget, over several seeds, and report.

    trl-ext compare --recipes grpo,dapo,dr_grpo --seeds 3 --steps 150 --output_dir compare

writes ``compare/comparison.md`` (per recipe: final accuracy mean ± std over seeds and whether it separates from
GRPO's, generated samples and wall time to reach an accuracy threshold, completion length, entropy, clip fractions),
``compare/comparison.png`` (small multiples: each recipe against GRPO by optimizer steps and by generated samples, a
band over seeds; ``figure``) and ``compare/results.json``. ``--task mixed`` trains on the built-in task with a set share
of always- and never-rewarded prompts and measures held-out accuracy at a fixed evaluation seed (``tasks``); the
separation rule is ``separation.RULE``.

The default recipes are every RL recipe (PPO's critic starts from the policy on the demo task). By default every run
starts from the offline demo's warm-started tiny policy on its arithmetic task (one warm start
per seed, shared by the recipes); ``--model_name_or_path`` / ``--dataset_name`` run the same comparison on a real
model and a prompt/solution dataset. Every recipe keeps its paper defaults (clipping, estimator, KL, dynamic sampling,
temperature, reward values) and runs ``--updates_per_rollout`` optimizer steps per generation batch, except
Magistral, whose minibatch statistics need one update per batch (it gets the same samples per step).
"""

from trl_ext.compare.cards import write_example_card
from trl_ext.compare.flags import add_compare_arguments, compare_from_args
from trl_ext.compare.plot import plot_comparison
from trl_ext.compare.run import recipe_args, run_compare, task_of_seed, train_one
from trl_ext.compare.settings import (
    ACCURACY_KEY,
    COMPARE_RECIPES,
    DEFAULT_RECIPES,
    PLOT_FILE,
    POLICY_CRITIC,
    RESULTS_FILE,
    SUMMARY_KEYS,
    TABLE_FILE,
    CompareError,
    CompareSettings,
    parse_recipes,
    validate,
)
from trl_ext.compare.summary import curve, first_crossing, smoothed, summarise, write_table

__all__ = [
    "ACCURACY_KEY",
    "COMPARE_RECIPES",
    "DEFAULT_RECIPES",
    "PLOT_FILE",
    "POLICY_CRITIC",
    "RESULTS_FILE",
    "SUMMARY_KEYS",
    "TABLE_FILE",
    "CompareError",
    "CompareSettings",
    "add_compare_arguments",
    "compare_from_args",
    "curve",
    "first_crossing",
    "parse_recipes",
    "plot_comparison",
    "recipe_args",
    "run_compare",
    "smoothed",
    "summarise",
    "task_of_seed",
    "train_one",
    "validate",
    "write_example_card",
    "write_table",
]
