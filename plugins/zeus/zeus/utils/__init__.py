"""Helpers of upstream's ``zeus.utils``: environment variables, the cost metric, framework glue."""
