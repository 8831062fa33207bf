"""Fitting: the shipped models and constants fitted on labelled data (written only with --write), and the labelling aids."""
