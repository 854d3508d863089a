"""Average the parameters of checkpoints of one network into a new run folder (weight averaging).

The checkpoints of one fine-tuning run lie in one basin; their uniform average (stochastic weight
averaging, "model soups") is often a little better than any one of them. Pick the sources and judge
the result on fresh graphs with experiments/compare_checkpoints.py, never on the held-out set:

    .venv/bin/python experiments/average_checkpoints.py runs/cut_w128_d/checkpoints/1000 \\
        runs/cut_w128_d/checkpoints/2000 --out runs/soup
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from respect_jax.train.checkpoints import average_checkpoints  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", help="run folders or step folders of one network (two or more)")
    parser.add_argument("--out", required=True, help="new run folder (must not exist or be empty)")
    args = parser.parse_args()
    try:
        doc = average_checkpoints(args.sources, args.out)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"average_checkpoints: {err}") from None
    print(f"average_checkpoints: wrote {args.out} (mean of {len(doc['averaged_from'])} checkpoints)")


if __name__ == "__main__":
    main()
