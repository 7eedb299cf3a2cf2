"""``tritonwatch advise``: dynamic batching settings from the traffic a Triton server already sees.

``observed`` reads what the server says (model config, statistics) into typed values and fits compute
time against batch size; ``simulate`` runs the dynamic batcher's rules on that fit; ``search`` finds the
configuration with the most SLO-bound capacity; ``triton`` reads a live server; ``render`` prints;
``command`` is the CLI. The method is explained in docs/advise.md.
"""
