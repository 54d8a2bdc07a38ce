"""verl: tool classes, tool config, reward functions and manager, dataset, parser, parquet export, dry run."""
