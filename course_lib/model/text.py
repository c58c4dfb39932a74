"""Words for the models' descriptions (and the pictures' captions, which read the same)."""


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """'1 pass', '2 passes', '1 wave', '4 waves': the count with the noun in the right number."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"
