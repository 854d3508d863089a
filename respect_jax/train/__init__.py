"""Training: the one harness every trainer runs through, and the GNN policy's trainer.

File map:

    harness.py      TrainState, the optimiser factory (optax schedules), scanned_epoch, host_loop (the host side of
                    every trainer: resume-or-refuse, checkpoints, metrics, progress lines, multi-process rule)
    run_folder.py   the run folder's files: network.json, config.yaml, metrics.jsonl, resume-or-refuse checks
    checkpoints.py  orbax Checkpointer; the GNN policy's network document, load_policy, checkpoint averaging
    config.py       plain dataclasses of the training settings (TrainConfig, AlgorithmConfig, ConditioningConfig)
    loop.py         the GNN policy's Trainer: pure update step, scanned epoch, evaluation, fit -> host_loop
    algorithms.py   the GNN policy's losses (imitation, REINFORCE, self-improvement)
    data.py         labelled buckets on the device; hardware.py: per-graph hardware sampling (conditioning)
    sharding.py     the data-parallel mesh and multi-process launch detection
    evaluation.py   greedy decoding of evaluation sets (gap, % optimal)
    order.py        the order policy's expert-iteration trainer (own loop, shared run-folder files)
    run_logs.py     TensorBoard event files and curves.png beside metrics.jsonl

A trainer supplies its initial state, a pure scanned epoch and its network document; the others that do so are
``respect_pointer/train.py`` (RESPECT pointer), ``realtime/train.py`` (real-time policy) and
``edge_cluster/dqn.py`` (ASET DQN).
"""
