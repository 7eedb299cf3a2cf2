"""tritonwatch: exporters."""
