"""Reporters: findings and facts rendered for terminals, CI systems and people."""
