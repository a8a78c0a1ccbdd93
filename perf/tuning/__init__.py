# SPDX-License-Identifier: Apache-2.0
"""Tuning tools over the dataset of measured runs (perf/data/): PYTHONPATH=perf python3 -m
tuning.<module> --help. Standard library only."""
