"""tritonwatch: reports."""
