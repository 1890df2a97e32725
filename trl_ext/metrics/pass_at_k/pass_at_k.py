"""pass@k as an `evaluate` metric module, loadable offline: ``evaluate.load(trl_ext.metrics.PASS_AT_K)``.

Unlike `evaluate`'s `code_eval`, it runs no code: it takes per-sample correctness (decided by trl_ext's verifiable
rewards, whose code runs in trl_ext.sandbox) and computes the unbiased estimator of Chen et al. 2021 with
``trl_ext.core.metrics.pass_at_k``.
"""

import datasets
import evaluate
import torch

from trl_ext.core.metrics import pass_at_k

_CITATION = """@article{chen2021evaluating,
  title   = {Evaluating Large Language Models Trained on Code},
  author  = {Mark Chen and Jerry Tworek and Heewoo Jun and Qiming Yuan and others},
  journal = {arXiv preprint arXiv:2107.03374},
  year    = {2021}
}"""
_DESCRIPTION = "Unbiased pass@k (Chen et al. 2021, Eq. 1) from per-sample correctness; runs no code."
_KWARGS_DESCRIPTION = """
Args:
    predictions: for each problem, a list of booleans (or 0/1): whether each of its n samples is correct.
    references: ignored (correctness is already decided); pass one placeholder per problem, e.g. 0.
    k: list of k values (each at most the number of samples of every problem). Default [1].
Returns:
    {"pass@k": mean over problems} for every k.
Example:
    >>> metric = evaluate.load(trl_ext.metrics.PASS_AT_K)
    >>> metric.compute(predictions=[[True, False, False, False]], references=[0], k=[1, 4])
    {'pass@1': 0.25, 'pass@4': 1.0}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class PassAtK(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Sequence(datasets.Value("bool")), "references": datasets.Value("int32")}
            ),
            reference_urls=["https://arxiv.org/abs/2107.03374"],
        )

    def _compute(self, predictions, references, k=(1,)):
        samples = torch.tensor([len(p) for p in predictions])
        correct = torch.tensor([sum(bool(x) for x in p) for p in predictions])
        return {f"pass@{kk}": float(pass_at_k(samples, correct, kk).mean()) for kk in k}
