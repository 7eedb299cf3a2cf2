"""tritonwatch: observability and SLOs for NVIDIA Triton Inference Server."""

__version__ = "0.1.0"
