"""Stage module (being written in this session; registers nothing yet)."""
