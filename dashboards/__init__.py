"""tritonwatch: dashboards."""
