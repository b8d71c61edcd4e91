"""The tasks of the Django task tests (``tasks_app.tasks``) and the worker's settings."""
