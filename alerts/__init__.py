"""tritonwatch: alerts."""
