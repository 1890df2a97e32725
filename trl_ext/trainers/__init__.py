"""Trainers: one module per recipe; each is mostly a Config with paper defaults."""
