"""Measuring: the one timing protocol, verification against a reference, static reports."""
