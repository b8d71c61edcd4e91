"""Integrations with application frameworks: :mod:`pgque.contrib.django`."""
