"""placeholder until the layout move lands."""
