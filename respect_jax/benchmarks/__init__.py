"""Speed figures, one home: :mod:`.env` (env steps/s against a Python loop, generator graphs/s),
:mod:`.policy` (the learned scheduler: training throughput, compile time, latency, many graphs at once) and
:mod:`.report` (the Markdown page of ``respect-bench``). Callers write the machine description beside them."""
