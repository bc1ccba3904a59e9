"""What every benchmark shares: statistics, tallies, the report's formatting, process measurements, profiles and the targets' base."""
