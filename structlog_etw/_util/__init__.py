"""Helpers of no direction (standard library only): counters and guards, lazy package exports."""
