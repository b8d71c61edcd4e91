"""A tiny Django app for the integration tests: two models and a consumers module."""
