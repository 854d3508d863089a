"""Regenerate the generated parts of ``README.md`` and ``experiments/RESULTS.md`` from
``experiments/results/`` (no number typed by hand).

    .venv/bin/python experiments/readme_results.py           # rewrites both files between their markers
    .venv/bin/python experiments/readme_results.py --check   # exit 1 if either is out of date

``README.md`` gets the headline figures: one line per entry of ``HEADLINES``, each value read from a table
cell (or a line) of a result file and linked to it. ``experiments/RESULTS.md`` gets an index of the
current figures (the entries named in ``CURRENT_TITLES``) and then every entry of ``ENTRIES`` (the full
record: model selection, runs that did not improve, superseded checkpoints): a heading, the command that
produced it, the selected part of its Markdown (tables and the machine line) and its figures. Entries
whose file does not exist yet are listed as "not yet run" with their command. The text between
``<!-- results:begin -->`` and ``<!-- results:end -->`` of each file is replaced; the text outside the
markers is kept.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"

# (title, result file, command, sections to keep (None: all, else headings to keep), figures)
ENTRIES = [
    ("Simulator and generator speed", "experiments/results/bench_env.md", ".venv/bin/respect-bench", None, []),
    ("Learned scheduler: quality (issue 4)", "experiments/results/bench_policy_quality.md",
     ".venv/bin/python experiments/bench_policy.py --skip-training --out experiments/results/bench_policy_quality",
     None, []),
    ("Learned scheduler after self-improvement: quality (issue 4)", "experiments/results/bench_policy_quality_si.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_paper_si --skip-training "
     "--out experiments/results/bench_policy_quality_si", None, []),
    ("Learned scheduler, fine-tuned self-improvement checkpoint (the default until 2026-12-04): quality (issue 4)",
     "experiments/results/bench_policy_quality_si_ft.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_paper_si_ft "
     "--skip-training "
     "--out experiments/results/bench_policy_quality_si_ft", None, []),
    ("Model selection of the fine-tuned checkpoint on fresh generated graphs (no held-out data)",
     "experiments/results/compare_si_ft.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si "
     "data/checkpoints/respect_k4_paper_si_ft --out experiments/results/compare_si_ft", None, []),
    ("Default checkpoint + local search with pair-move escapes (`+ls+pairs`): quality (issue 4)",
     "experiments/results/bench_policy_quality_si_ft_pairs.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_paper_si_ft "
     "--skip-training --dnn-graphs 0 --pair-escapes 20 --pair-candidates 8 "
     "--out experiments/results/bench_policy_quality_si_ft_pairs", None, []),
    ("Latency checkpoint + local search with pair-move escapes (`+ls+pairs`): quality (issue 4)",
     "experiments/results/bench_policy_latency_si_pairs.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_latency_si "
     "--labels50 data/labels/respect50_k4_latency --skip-training --dnn-graphs 0 --pair-escapes 20 "
     "--pair-candidates 8 --out experiments/results/bench_policy_latency_si_pairs", None, []),
    ("Default checkpoint, beam search (`beam_64`) next to best-of-64 sampling: quality (issue 4)",
     "experiments/results/bench_policy_quality_si_ft_beam.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_paper_si_ft "
     "--skip-training --dnn-graphs 0 --beam 64 --pair-escapes 20 --pair-candidates 8 "
     "--out experiments/results/bench_policy_quality_si_ft_beam", None, []),
    ("Default checkpoint, a wider beam (`beam_256`, the policy alone): quality (issue 4)",
     "experiments/results/eval_respect_k4_paper_si_ft_respect50_beam256.md",
     ".venv/bin/respect-eval checkpoint=data/checkpoints/respect_k4_paper_si_ft "
     "dataset=data/labels/respect50_k4_paper decodings=[beam] samples=256 baselines=[] "
     "out=experiments/results/eval_respect_k4_paper_si_ft_respect50_beam256.json", None, []),
    ("Latency checkpoint, beam search (`beam_64`) next to best-of-64 sampling: quality (issue 4)",
     "experiments/results/bench_policy_latency_si_beam.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_latency_si "
     "--labels50 data/labels/respect50_k4_latency --skip-training --dnn-graphs 0 --beam 64 --local-search 300 "
     "--out experiments/results/bench_policy_latency_si_beam", None, []),
    ("Longer self-improvement plateaus: 4,000 more steps (runs/si_G), then 2,000 on 50-node graphs only (runs/si_H)",
     "experiments/results/compare_si_H.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/si_H/checkpoints/1500 runs/si_H/checkpoints/2000 --graphs 1024 --samples 16 "
     "--out experiments/results/compare_si_H (training commands: data/checkpoints/README.md)", None, []),
    ("A beam-search self-improvement teacher plateaus too: 2,000 more steps with `teacher=beam` (runs/si_beam)",
     "experiments/results/compare_si_beam.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/si_beam/checkpoints/1500 runs/si_beam/checkpoints/2000 --beam 16 "
     "--out experiments/results/compare_si_beam (training command: data/checkpoints/README.md)", None, []),
    ("A deeper decoder plateaus too: 2,000 more steps with 4 decoder blocks instead of 2 (runs/si_grow)",
     "experiments/results/compare_si_grow.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/si_grow/checkpoints/1500 runs/si_grow/checkpoints/2000 --beam 16 "
     "--out experiments/results/compare_si_grow (training command: data/checkpoints/README.md)", None, []),
    ("Leader-reward REINFORCE (best sample's advantage x4) sharpens the policy and hurts best-of-64 (runs/leader)",
     "experiments/results/compare_leader.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/leader/checkpoints/300 runs/leader/checkpoints/600 --samples 64 "
     "--out experiments/results/compare_leader (training command: data/checkpoints/README.md)", None, []),
    ("A nearer self-improvement teacher (the greedy schedule + hill climbing, runs/si_greedy_ls) is worse",
     "experiments/results/compare_si_greedy_ls.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/si_greedy_ls/checkpoints/1000 runs/si_greedy_ls/checkpoints/2000 --samples 16 "
     "--out experiments/results/compare_si_greedy_ls (training command: data/checkpoints/README.md)", None, []),
    ("A stronger self-improvement teacher (best of 64 samples + 300 hill-climbing moves, runs/si_strong) plateaus too",
     "experiments/results/compare_si_strong.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/si_strong/checkpoints/1000 runs/si_strong/checkpoints/2000 --samples 16 --beam 16 "
     "--out experiments/results/compare_si_strong (training command: data/checkpoints/README.md)", None, []),
    ("A wider network (width 128, runs/si_w128 + runs/si_w128_ft) matches the shipped one in 6,000 steps, not 9,000",
     "experiments/results/compare_w128.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/si_w128_ft/checkpoints/1000 runs/si_w128_ft/checkpoints/1500 --samples 16 --beam 16 "
     "--out experiments/results/compare_w128 (training commands: data/checkpoints/README.md)", None, []),
    ("The decoder's cut attention (policy.cut_heads=4) added to the width-128 network (runs/cut_w128): 2,000 "
     "self-improvement steps, within 0.06% of the shipped checkpoint",
     "experiments/results/compare_cut_w128.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft runs/si_w128_ft2 "
     "runs/cut_w128/checkpoints/1500 runs/cut_w128/checkpoints/1750 runs/cut_w128/checkpoints/2000 --beam 16 "
     "--out experiments/results/compare_cut_w128 (training command: data/checkpoints/README.md)", None, []),
    ("The same cut-attention network (runs/cut_w128, step 2000) on the 500 held-out 50-node graphs (respect-eval)",
     "experiments/results/eval_cut_w128_respect50.md",
     ".venv/bin/respect-eval checkpoint=runs/cut_w128/checkpoints/2000 dataset=data/labels/respect50_k4_paper "
     "decodings=[greedy,best_of,beam] samples=64 baselines=[] out=experiments/results/eval_cut_w128_respect50.json",
     None, []),
    ("2,000 more steps of the cut-attention network (runs/cut_w128_b): greedy 0.17% better than the shipped checkpoint",
     "experiments/results/compare_cut_w128_b.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/cut_w128/checkpoints/2000 runs/cut_w128_b/checkpoints/1500 runs/cut_w128_b/checkpoints/2000 --beam 16 "
     "--out experiments/results/compare_cut_w128_b (training command: data/checkpoints/README.md)", None, []),
    ("runs/cut_w128_b (step 2000) on the 500 held-out 50-node graphs (respect-eval)",
     "experiments/results/eval_cut_w128_b_respect50.md",
     ".venv/bin/respect-eval checkpoint=runs/cut_w128_b/checkpoints/2000 dataset=data/labels/respect50_k4_paper "
     "decodings=[greedy,best_of,beam] samples=64 baselines=[] out=experiments/results/eval_cut_w128_b_respect50.json",
     None, []),
    ("Model selection of the third cut-attention segment (runs/cut_w128_c step 2000, shipped until 2026-12-04)",
     "experiments/results/compare_cut_w128_c.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/cut_w128_b/checkpoints/2000 runs/cut_w128_c/checkpoints/1500 runs/cut_w128_c/checkpoints/2000 --beam 16 "
     "--out experiments/results/compare_cut_w128_c (training command: data/checkpoints/README.md)", None, []),
    ("runs/cut_w128_c (step 2000) on the 500 held-out 50-node graphs (respect-eval)",
     "experiments/results/eval_cut_w128_c_respect50.md",
     ".venv/bin/respect-eval checkpoint=runs/cut_w128_c/checkpoints/2000 dataset=data/labels/respect50_k4_paper "
     "decodings=[greedy,best_of,beam] samples=64 baselines=[] out=experiments/results/eval_cut_w128_c_respect50.json",
     None, []),
    ("A fourth 2,000-step segment of the cut-attention network (runs/cut_w128_d): no further gain",
     "experiments/results/compare_cut_w128_d.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_si_ft "
     "runs/cut_w128_c/checkpoints/2000 runs/cut_w128_d/checkpoints/1500 runs/cut_w128_d/checkpoints/2000 --beam 16 "
     "--out experiments/results/compare_cut_w128_d (training command: data/checkpoints/README.md)", None, []),
    ("Weight averages of the cut-attention checkpoints against runs/cut_w128_c step 2000 (model selection of "
     "respect_k4_paper_cut = runs/soup_cde)",
     "experiments/results/compare_cut_soup.md",
     ".venv/bin/python experiments/compare_checkpoints.py runs/cut_w128_c/checkpoints/2000 "
     "runs/cut_w128_e/checkpoints/2000 runs/soup_cd runs/soup_de runs/soup_cde --beam 16 "
     "--out experiments/results/compare_cut_soup (commands: data/checkpoints/README.md)", None, []),
    ("Shipped cut-attention checkpoint (respect_k4_paper_cut) on the 500 held-out 50-node graphs: quality (issue 4)",
     "experiments/results/eval_cut_soup_respect50.md",
     ".venv/bin/respect-eval checkpoint=data/checkpoints/respect_k4_paper_cut dataset=data/labels/respect50_k4_paper "
     "decodings=[greedy,best_of,beam] samples=64 baselines=[] out=experiments/results/eval_cut_soup_respect50.json",
     None, []),
    ("The default checkpoint (respect_k4_paper_cut, the cut-attention network): quality, with beam search (issue 4)",
     "experiments/results/bench_policy_quality_cut.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_paper_cut --skip-training "
     "--beam 64 --out experiments/results/bench_policy_quality_cut", None, []),
    ("The default checkpoint with 64 distinct samples (`sbs_64`, stochastic beam search) next to best-of-64 and "
     "beam-64, each + local search and + pair escapes (issue 4)",
     "experiments/results/bench_policy_quality_cut_sbs.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_paper_cut --skip-training "
     "--beam 64 --sbs 64 --pair-escapes 20 --pair-candidates 8 --dnn-graphs 0 "
     "--out experiments/results/bench_policy_quality_cut_sbs", None, []),
    ("Latency checkpoint with 64 distinct samples (`sbs_64`) next to best-of-64 and beam-64, each + local search "
     "(issue 4)",
     "experiments/results/bench_policy_latency_si_sbs.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_latency_si "
     "--labels50 data/labels/respect50_k4_latency --skip-training --dnn-graphs 0 --beam 64 --sbs 64 "
     "--out experiments/results/bench_policy_latency_si_sbs", None, []),
    ("Quality against decoding budget, the policy alone: best-of-N, N distinct samples (sbs), beam-N (issue 4)",
     "experiments/results/decoding_budget_cut.md",
     ".venv/bin/python experiments/decoding_budget.py --checkpoint data/checkpoints/respect_k4_paper_cut "
     "--out experiments/results/decoding_budget_cut", None, ["experiments/results/decoding_budget_cut.png"]),
    ("The best contiguous split of the SPEC order against the proven optima: what any compiler-style partitioner "
     "loses (issue 4)",
     "experiments/results/contiguous_optimum_respect50.md",
     ".venv/bin/python experiments/contiguous_optimum.py --labels data/labels/respect50_k4_paper "
     "--out experiments/results/contiguous_optimum_respect50", None,
     ["experiments/results/contiguous_optimum_respect50.png"]),
    ("The best contiguous split against the proven optima, latency objective (issue 4)",
     "experiments/results/contiguous_optimum_respect50_latency.md",
     ".venv/bin/python experiments/contiguous_optimum.py --labels data/labels/respect50_k4_latency "
     "--out experiments/results/contiguous_optimum_respect50_latency", None,
     ["experiments/results/contiguous_optimum_respect50_latency.png"]),
    ("best-of-64, sbs-64 and beam-64 of the default checkpoint on fresh generated graphs (decoding selection)",
     "experiments/results/compare_cut_sbs.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_cut --graphs 1024 "
     "--samples 64 --beam 64 --sbs 64 --out experiments/results/compare_cut_sbs", None, []),
    ("Dense vs segment message passing: why decoders encode with segment ops (issue 4)",
     "experiments/results/bench_aggregation.md",
     ".venv/bin/python experiments/bench_aggregation.py --out experiments/results/bench_aggregation", None, []),
    ("respect_k4_paper_cut fine-tuned on 50-node graphs only (runs/cut_f50): no gain, not shipped",
     "experiments/results/compare_cut_f50.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_cut "
     "runs/cut_f50/checkpoints/1000 runs/cut_f50/checkpoints/1500 --beam 16 "
     "--out experiments/results/compare_cut_f50 (training command: data/checkpoints/README.md)", None, []),
    ("Weight averages with runs/cut_f50 against respect_k4_paper_cut: no gain worth shipping",
     "experiments/results/compare_cut_f50_soup.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_cut runs/soup_f50 "
     "runs/soup_cut_f50 --beam 16 --out experiments/results/compare_cut_f50_soup "
     "(commands: data/checkpoints/README.md)",
     None, []),
    ("respect_k4_paper_cut fine-tuned with 128 graphs per step (runs/cut_big) and its averages: no gain, not shipped",
     "experiments/results/compare_cut_big.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_cut "
     "runs/cut_big/checkpoints/1000 runs/soup_big runs/soup_big_only --beam 16 "
     "--out experiments/results/compare_cut_big (commands: data/checkpoints/README.md)", None, []),
    ("A fifth 2,000-step segment from respect_k4_paper_cut (runs/cut_w128_f) and its averages: no gain, not shipped",
     "experiments/results/compare_cut_f.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_cut "
     "runs/cut_w128_f/checkpoints/2000 runs/soup_f runs/soup_cut_f --beam 16 "
     "--out experiments/results/compare_cut_f (commands: data/checkpoints/README.md)", None, []),
    ("Sampling temperature of best-of-64 for respect_k4_paper_cut (model selection of the decoding, fresh graphs)",
     "experiments/results/compare_cut_temperature.md",
     ".venv/bin/python experiments/compare_checkpoints.py data/checkpoints/respect_k4_paper_cut --graphs 1024 "
     "--samples 64 --temperatures 0.75 1.0 1.25 1.5 2.0 --out experiments/results/compare_cut_temperature", None, []),
    ("Validation set (300 proven-optimal 50-node graphs, seed 3): the default checkpoint respect_k4_paper_cut",
     "experiments/results/eval_val_cut.md",
     ".venv/bin/respect-eval checkpoint=data/checkpoints/respect_k4_paper_cut "
     "dataset=data/labels/respect50_k4_paper_val decodings=[greedy,best_of] samples=64 baselines=[] "
     "out=experiments/results/eval_val_cut.json", None, []),
    ("Validation set: respect_k4_paper_cut after imitation of 3,000 proven-optimal 50-node labels (runs/imit50, "
     "not shipped)",
     "experiments/results/eval_val_imit50.md",
     ".venv/bin/respect-eval checkpoint=runs/imit50/checkpoints/1500 dataset=data/labels/respect50_k4_paper_val "
     "decodings=[greedy,best_of] samples=64 baselines=[] out=experiments/results/eval_val_imit50.json "
     "(training commands: data/checkpoints/README.md)", None, []),
    ("Validation set: runs/imit50 then 1,000 self-improvement steps (runs/imit50_si, not shipped)",
     "experiments/results/eval_val_imit50_si.md",
     ".venv/bin/respect-eval checkpoint=runs/imit50_si/checkpoints/1000 dataset=data/labels/respect50_k4_paper_val "
     "decodings=[greedy,best_of] samples=64 baselines=[] out=experiments/results/eval_val_imit50_si.json "
     "(training commands: data/checkpoints/README.md)", None, []),
    ("Self-improvement checkpoint + local search, best-of-64 at temperature 1.5 (respect-eval)",
     "experiments/results/eval_respect_k4_paper_si_respect50_ls_t15.md",
     ".venv/bin/respect-eval checkpoint=data/checkpoints/respect_k4_paper_si dataset=data/labels/respect50_k4_paper "
     "decodings=[best_of] temperature=1.5 local_search=300 baselines=[] "
     "out=experiments/results/eval_respect_k4_paper_si_respect50_ls_t15.json", None, []),
    ("Learned scheduler: training and scheduling speed (issue 4)", "experiments/results/bench_policy_speed.md",
     ".venv/bin/respect-bench benchmarks=[policy] out_name=bench_policy_speed", None, []),
    ("Learned scheduler: latency objective (issue 4)", "experiments/results/bench_policy_latency.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_latency "
     "--labels50 data/labels/respect50_k4_latency --dnn-graphs 40 --skip-training "
     "--out experiments/results/bench_policy_latency", None, []),
    ("Learned scheduler after self-improvement: latency objective (issue 4)",
     "experiments/results/bench_policy_latency_si.md",
     ".venv/bin/python experiments/bench_policy.py --checkpoint data/checkpoints/respect_k4_latency_si "
     "--labels50 data/labels/respect50_k4_latency --dnn-graphs 40 --skip-training "
     "--out experiments/results/bench_policy_latency_si", None, []),
    ("Learned scheduler after self-improvement: training and scheduling speed of the GAT policy",
     "experiments/results/bench_policy_speed_si.md",
     ".venv/bin/respect-bench benchmarks=[policy] policy.checkpoint=data/checkpoints/respect_k4_paper_si "
     "out_name=bench_policy_speed_si", None, []),
    ("Training and scheduling speed of the cut-attention network (respect_k4_paper_cut: width 128, cut_heads 4)",
     "experiments/results/bench_policy_speed_cut.md",
     ".venv/bin/respect-bench benchmarks=[policy] policy.checkpoint=data/checkpoints/respect_k4_paper_cut "
     "out_name=bench_policy_speed_cut", None, []),
    ("Policy evaluation against proven optima (respect-eval)",
     "experiments/results/eval_respect_k4_paper_respect50.md",
     ".venv/bin/respect-eval checkpoint=data/checkpoints/respect_k4_paper dataset=data/labels/respect50_k4_paper "
     "out=experiments/results/eval_respect_k4_paper_respect50.json",
     None, []),
    ("Policy + local search, best-of-64 at temperature 1.5 (respect-eval)",
     "experiments/results/eval_respect_k4_paper_respect50_ls_t15.md",
     ".venv/bin/respect-eval checkpoint=data/checkpoints/respect_k4_paper dataset=data/labels/respect50_k4_paper "
     "decodings=[best_of] temperature=1.5 local_search=300 baselines=[] "
     "out=experiments/results/eval_respect_k4_paper_respect50_ls_t15.json", None, []),
    ("Table 1: real models, paper objective", "experiments/results/real_models/real_models.md",
     ".venv/bin/python experiments/paper.py experiment=real_models (recorded before solver=contiguous joined "
     "its methods: see the next table)", ["Summary per K and method"],
     ["experiments/results/real_models/stage_memory.png", "experiments/results/real_models/pareto.png"]),
    ("Table 1 with the best contiguous split (solver=contiguous) beside its methods: gaps to the best known",
     "experiments/results/contiguous_real_models.md",
     ".venv/bin/python experiments/contiguous_optimum.py "
     "--real-models experiments/results/real_models/real_models.json --out experiments/results/contiguous_real_models",
     None, []),
    ("Table 1 at K = 4 with the policy's greedy schedule + local search",
     "experiments/results/real_models_ls/real_models.md",
     ".venv/bin/python experiments/paper.py experiment=real_models experiment.stages=[4] "
     "'~experiment.methods.profiling' '~experiment.methods.respect_pointer' "
     "'~experiment.methods.policy_best_of_64' '~experiment.methods.gumbel' "
     "experiment.methods.milp.options.time_limit_s=30 experiment.bar_models=[resnet50] "
     "out_dir=experiments/results/real_models_ls", ["Summary per K and method"], []),
    ("Table 1 at K = 4 with the self-improvement checkpoint (greedy, best-of-64, greedy + local search)",
     "experiments/results/real_models_si/real_models.md",
     ".venv/bin/python experiments/paper.py experiment=real_models "
     "policy_checkpoint=data/checkpoints/respect_k4_paper_si experiment.stages=[4] "
     "'~experiment.methods.profiling' '~experiment.methods.respect_pointer' "
     "'~experiment.methods.gumbel' experiment.methods.milp.options.time_limit_s=30 experiment.bar_models=[resnet50] "
     "out_dir=experiments/results/real_models_si", ["Summary per K and method"], []),
    ("Table 2: schedule time", "experiments/results/real_models/real_models.md",
     ".venv/bin/python experiments/paper.py experiment=real_models", ["Table 2"], []),
    ("Table 1 under the latency objective (throughput)", "experiments/results/real_models_latency/real_models.md",
     ".venv/bin/python experiments/paper.py experiment=real_models objective=latency "
     "policy_checkpoint=data/checkpoints/respect_k4_latency_si experiment.methods.milp.options.time_limit_s=30 "
     "out_dir=experiments/results/real_models_latency", ["Summary per K and method"],
     ["experiments/results/real_models_latency/stage_memory.png"]),
    ("Real models on the Coral USB preset: compiler split vs MILP, and a LiteRT CPU pipeline (issue 5)",
     "data/models/README.md", "the script in data/models/README.md; respect-deploy model=mobilenetv2 ...",
     ["Compiler split versus MILP", "Segmenting a real model"], []),
    ("Table 3: generalisation to larger graphs", "experiments/results/generalisation/generalisation.md",
     ".venv/bin/python experiments/paper.py experiment=generalisation", None,
     ["experiments/results/generalisation/generalisation.png"]),
    ("RL-to-ILP warm start", "experiments/results/warm_start/warm_start.md",
     ".venv/bin/python experiments/paper.py experiment=warm_start", ["RL-to-ILP warm start"], []),
    ("Training curves of the paper experiments' checkpoints (respect_k4_paper, respect_pointer_k4_paper)",
     "experiments/results/training_curves/training_curves.md",
     ".venv/bin/python experiments/paper.py experiment=training_curves", None,
     ["experiments/results/training_curves/training_curves.png"]),
    ("ASET: success ratio per policy and load, scenario `small` (issue 7)", "experiments/results/edge/success_small.md",
     ".venv/bin/python experiments/edge_success.py --retrain", None, ["experiments/results/edge/success_small.png"]),
    ("ASET: success ratio per policy and load, ISP-like scenario (issue 7)", "experiments/results/edge/success_isp.md",
     ".venv/bin/python experiments/edge_success.py --retrain", None, ["experiments/results/edge/success_isp.png"]),
    ("ASET: training wall time (issue 7)", "experiments/results/edge/training.md",
     ".venv/bin/python experiments/edge_success.py --retrain", None, []),
    ("ASET: the policy-switching agent under conditions that change within the episode (issue 30)",
     "experiments/results/edge/dynamic_aset_s25.md",
     ".venv/bin/python experiments/edge_dynamic.py --train --train-only --kind switch --seeds 0 1 2 --set rollouts=3 "
     "spread_head=true --agents experiments/results/edge/agents/switch_f3  # then "
     "--agents experiments/results/edge/agents/switch_f3 --stem dynamic_aset_s25 --margin 0.25", None, []),
    ("ASET: simulator speed vs the Python reference (issue 7)", "experiments/results/edge/speed.md",
     ".venv/bin/python experiments/edge_speed.py", None, []),
    ("Real-time scheduler with safety layer (issue 8)", "experiments/results/rt/rt_eval.md",
     ".venv/bin/python experiments/rt_sweep.py   # = respect-rt eval run_dir=experiments/results/rt/policy", None,
     ["experiments/results/rt/rt_hrt_schedulability.png"]),
    ("Exact oracles and baselines (issue 3)", "experiments/results/bench_solvers.md",
     ".venv/bin/python experiments/bench_solvers.py --n30 100 --n100 8 --n300 1 --n700 1 --time-limit 30 "
     "--big-time-limit 60", None, []),
    ("Exact oracles and baselines on 100 random 100-node graphs (issue 3)",
     "experiments/results/bench_solvers_100/bench_solvers.md",
     ".venv/bin/python experiments/bench_solvers.py --n30 0 --n100 100 --n300 0 --n700 0 --time-limit 60 "
     "--out-dir experiments/results/bench_solvers_100", None, []),
    ("Batched Gumbel-softmax solver, 300-node DNN graphs (issue 3)", "experiments/results/bench_gumbel.md",
     ".venv/bin/python experiments/bench_gumbel.py", None, []),
    ("Batched Gumbel-softmax solver, 700-node DNN graphs (issue 3)",
     "experiments/results/bench_gumbel_700/bench_gumbel.md",
     ".venv/bin/python experiments/bench_gumbel.py --graphs 4 --nodes 700 "
     "--out-dir experiments/results/bench_gumbel_700", None, []),
]

# the entries of the current figures (indexed at the top of experiments/RESULTS.md, which shows every entry)
CURRENT_TITLES = {
    'Simulator and generator speed',
    'The default checkpoint (respect_k4_paper_cut, the cut-attention network): quality, with beam search (issue 4)',
    "The default checkpoint with 64 distinct samples (`sbs_64`, stochastic beam search) next to best-of-64 and "
    "beam-64, each + local search and + pair escapes (issue 4)",
    "Latency checkpoint with 64 distinct samples (`sbs_64`) next to best-of-64 and beam-64, each + local search "
    "(issue 4)",
    'Quality against decoding budget, the policy alone: best-of-N, N distinct samples (sbs), beam-N (issue 4)',
    "The best contiguous split of the SPEC order against the proven optima: what any compiler-style partitioner "
    "loses (issue 4)",
    'Learned scheduler: training and scheduling speed (issue 4)',
    'Training and scheduling speed of the cut-attention network (respect_k4_paper_cut: width 128, cut_heads 4)',
    'Table 1: real models, paper objective',
    "Table 1 with the best contiguous split (solver=contiguous) beside its methods: gaps to the best known",
    'Table 2: schedule time',
    'Table 1 under the latency objective (throughput)',
    'Real models on the Coral USB preset: compiler split vs MILP, and a LiteRT CPU pipeline (issue 5)',
    'Table 3: generalisation to larger graphs',
    'RL-to-ILP warm start',
    "Training curves of the paper experiments' checkpoints (respect_k4_paper, respect_pointer_k4_paper)",
    'ASET: success ratio per policy and load, scenario `small` (issue 7)',
    'ASET: success ratio per policy and load, ISP-like scenario (issue 7)',
    'ASET: simulator speed vs the Python reference (issue 7)',
    'ASET: the policy-switching agent under conditions that change within the episode (issue 30)',
    'Real-time scheduler with safety layer (issue 8)',
    'Exact oracles and baselines (issue 3)',
    'Batched Gumbel-softmax solver, 300-node DNN graphs (issue 3)',
}


# README.md's headline figures: (what, result file, template, cells). A cell is (row, column): the
# ``column`` of the first table row whose cells equal every item of ``row``; or a regular expression
# whose first group is the value, searched in the whole file. ``{0}``, ``{1}``, ... in the template are
# the cells in order (Markdown emphasis stripped).
QUALITY = "experiments/results/bench_policy_quality_cut.md"
QUALITY_SBS = "experiments/results/bench_policy_quality_cut_sbs.md"
SOLVERS = "experiments/results/bench_solvers.md"
HEADLINES = [
    ("Step policy, 500 held-out 50-node random graphs: mean gap to the proven optimum",
     QUALITY, "greedy {0} %, beam-64 {1} %",
     [({"decoding": "greedy"}, "mean gap %"), ({"decoding": "beam_64"}, "mean gap %")]),
    ("... 64 distinct samples + local search + pair moves", QUALITY_SBS,
     "optimal on {0} % of them, mean gap {1} %",
     [({"decoding": "sbs_64+ls+pairs_top8"}, "optimal %"), ({"decoding": "sbs_64+ls+pairs_top8"}, "mean gap %")]),
    ("Exact best contiguous split of the node order, same graphs",
     "experiments/results/contiguous_optimum_respect50.md", "mean gap {0} % (the compiler's split: {1} %)",
     [({}, "best contiguous split: gap mean %"), ({}, "compiler split: gap mean %")]),
    ("Step policy, greedy, ResNet-101 (345 nodes), compiled, CPU",
     "experiments/results/bench_policy_speed_cut.md", "{0} ms", [r"resnet101 \(345 nodes.*?: ([\d.]+) ms best"]),
    ("CP-SAT, 100-node random graphs, paper objective: proves the optimum",
     SOLVERS, "on {0} % of them, median {1} s",
     [({"graphs": "random100", "objective": "paper", "solver": "cpsat"}, "proven %"),
      ({"graphs": "random100", "objective": "paper", "solver": "cpsat"}, "median time (s)")]),
    ("Gumbel-softmax solver, 300-node DNN-like graphs: ratio to the best known",
     "experiments/results/bench_gumbel.md", "paper {0}, latency {1}",
     [({"objective": "paper", "solver": "gumbel"}, "mean ratio"),
      ({"objective": "latency", "solver": "gumbel"}, "mean ratio")]),
    ("Environment: JAX (jit + vmap + scan) against a Python loop", "experiments/results/bench_env.md",
     "{0} the env steps/s", [({"environment": "**ratio**"}, "env steps/s")]),
    ("ASET, ISP-like scenario, overload: success ratio", "experiments/results/edge/isp_aset_s25.md",
     "policy-switching agent (3 seeds) {0} / {1} / {2}, best static policy fastest_expected {3}",
     [({"scenario": "isp", "load": "overload"}, "aset_s0"), ({"scenario": "isp", "load": "overload"}, "aset_s1"),
      ({"scenario": "isp", "load": "overload"}, "aset_s2"),
      ({"scenario": "isp", "load": "overload"}, "fastest_expected")]),
    ("ASET, 4 presets with load, delay and site failures changing in the episode: mean success over 16 cells",
     "experiments/results/edge/dynamic_aset_s25.md",
     "policy-switching agent (3 seeds) {0} / {1} / {2}, best static policy fastest_expected {3}; per cell: {4}",
     [({"policy": "aset_s0"}, "average success"), ({"policy": "aset_s1"}, "average success"),
      ({"policy": "aset_s2"}, "average success"), ({"policy": "fastest_expected"}, "average success"),
      r"Cells: ([^(]*?) the best static policy"]),
    ("Real-time scheduler at utilisation 0.9: hard-deadline task sets met", "experiments/results/rt/rt_eval.md",
     "RL + safety layer {0} %, EDF {1} %",
     [({"preset": "u90_balanced", "method": "rl+safety"}, "HRT sched. %"),
      ({"preset": "u90_balanced", "method": "edf"}, "HRT sched. %")]),
]


def sections(markdown: str, keep: list[str] | None) -> str:
    """The whole text, or only the parts under headings whose title starts with one of ``keep``
    (plus the last line when it is the machine line)."""
    text = markdown.strip()
    text = re.sub(r"^# .*\n+", "", text, count=1)  # the file's own title: the README gives its own
    if keep is None:
        return text
    parts, current, take = [], [], False
    for line in markdown.splitlines():
        if line.startswith("#"):
            if take:
                parts.append("\n".join(current).strip())
            title = line.lstrip("#").strip()
            take = any(title.startswith(k) for k in keep)
            current = []
            continue
        current.append(line)
    if take:
        parts.append("\n".join(current).strip())
    machine = [ln for ln in markdown.strip().splitlines()[-1:] if ln.startswith("Measured on")]
    if machine and machine[0] not in "\n".join(parts):
        parts.append(machine[0])
    return "\n\n".join(p for p in parts if p)


def demote_headings(markdown: str, levels: int = 2) -> str:
    """Headings of an embedded result file ``levels`` deeper (``## X`` -> ``#### X``), so they nest under
    the entry's ``###`` heading; lines inside code fences are left alone."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def relink_images(markdown: str, source: Path, at: Path) -> str:
    """Image links of a result file in folder ``source`` rewritten relative to folder ``at``."""

    def relink(match: re.Match) -> str:
        alt, target = match.group(1), match.group(2)
        if re.match(r"[a-z]+:|/", target):
            return match.group(0)
        return f"![{alt}]({os.path.relpath(source / target, at)})"

    return re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", relink, markdown)


def display_title(title: str) -> str:
    """An entry's title as printed: without the tracker references (``(issue 4)``) a reader cannot follow."""
    return re.sub(r" \(issue \d+\)", "", title)


def anchor(title: str) -> str:
    """The GitHub anchor of a Markdown heading ``title`` (lower case, punctuation dropped, spaces -> -)."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def render(entries: list[tuple], at: Path, current: set[str] = frozenset()) -> str:
    """The marked block of ``entries`` for a Markdown file in folder ``at`` (figure links relative to it),
    headed by an index of the entries whose title is in ``current``."""
    out = [BEGIN, "", "*Generated by `experiments/readme_results.py` from `experiments/results/`; "
           "every number comes from a result file written by the command above it.*", ""]
    index = [display_title(entry[0]) for entry in entries if entry[0] in current]
    if index:
        out += ["The current figures:", ""]
        out += [f"- [{title}](#{anchor(title)})" for title in index]
        out += ["", "Every result, in the order measured:", ""]
    for title, rel, command, keep, figures in entries:
        out.append(f"### {display_title(title)}")
        out.append("")
        out.append(f"`{command}` → `{rel}`")
        out.append("")
        path = ROOT / rel
        if not path.is_file():
            out += ["Not yet run in this checkout.", ""]
            continue
        text = relink_images(demote_headings(sections(path.read_text(), keep)), path.parent, at)
        out += [text, ""]
        for fig in figures:
            link = os.path.relpath(ROOT / fig, at)
            if (ROOT / fig).is_file() and f"]({link})" not in text:
                out += [f"![{Path(fig).stem}]({link})", ""]
    out.append(END)
    return "\n".join(out)


def markdown_tables(markdown: str) -> list[list[dict[str, str]]]:
    """Every pipe table of ``markdown`` as a list of rows (column name -> cell text, both stripped)."""
    tables, lines = [], markdown.splitlines()
    i = 0
    while i + 1 < len(lines):
        if lines[i].startswith("|") and re.match(r"\|[\s:|-]+\|\s*$", lines[i + 1]):
            header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                rows.append(dict(zip(header, cells, strict=False)))
                i += 1
            tables.append(rows)
        else:
            i += 1
    return tables


def cell(markdown: str, lookup: tuple[dict, str] | str) -> str | None:
    """The value ``lookup`` names in ``markdown`` (see ``HEADLINES``), or None when it is not there."""
    if isinstance(lookup, str):
        match = re.search(lookup, markdown)
        return match.group(1) if match else None
    row, column = lookup
    for table in markdown_tables(markdown):
        for cells in table:
            if column in cells and all(cells.get(k) == v for k, v in row.items()):
                return cells[column].replace("**", "")
    return None


def render_headlines(headlines: list[tuple], at: Path) -> str:
    """The marked block of README.md: one list item per headline (wrapped to 120 characters), its values
    read from its result file and the file linked relative to folder ``at``. Exits with a one-line message
    when a value is not found (a result file or row renamed)."""
    out = [BEGIN]
    for what, rel, template, lookups in headlines:
        path = ROOT / rel
        text = path.read_text() if path.is_file() else ""
        values = [cell(text, lookup) for lookup in lookups]
        if None in values:
            missing = [lookup for lookup, value in zip(lookups, values, strict=True) if value is None]
            sys.exit(f"HEADLINES: {rel} has no {missing} (file or table row renamed?); update HEADLINES")
        figure = template.format(*values)
        link = f"[{Path(rel).name}]({os.path.relpath(path, at)})"
        out += textwrap.wrap(f"- {what}: **{figure}** ({link})", width=120, subsequent_indent="  ",
                             break_long_words=False, break_on_hyphens=False)
    out.append(END)
    return "\n".join(out)


def rewrite(path: Path, block: str, check: bool = False) -> bool:
    """Replace the marked block of ``path`` (which must hold both markers) by ``block``; with ``check``,
    only report whether it would change. Returns True when the file is (or was already) up to date."""
    text = path.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + block + tail
    if check:
        print(f"{path.relative_to(ROOT)}: {'up to date' if new == text else 'out of date'}")
        return new == text
    path.write_text(new)
    print(f"rewrote the results section of {path.relative_to(ROOT)}")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if either file is out of date")
    args = ap.parse_args(argv)
    unknown = CURRENT_TITLES - {entry[0] for entry in ENTRIES}
    if unknown:
        sys.exit(f"CURRENT_TITLES names no entry: {sorted(unknown)}")
    readme, full = ROOT / "README.md", ROOT / "experiments" / "RESULTS.md"
    for path in (readme, full):  # check both before writing either
        if BEGIN not in path.read_text() or END not in path.read_text():
            sys.exit(f"{path}: markers {BEGIN} / {END} not found; add them where the results go")
    fresh = [rewrite(readme, render_headlines(HEADLINES, readme.parent), args.check),
             rewrite(full, render(ENTRIES, full.parent, CURRENT_TITLES), args.check)]
    return 0 if all(fresh) else 1


if __name__ == "__main__":
    sys.exit(main())
