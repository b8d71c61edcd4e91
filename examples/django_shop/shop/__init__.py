"""The django_shop project: settings and URLs."""
