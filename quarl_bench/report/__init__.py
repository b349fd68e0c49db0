"""Reports from the results store: tables and figures. Reads a DataFrame, writes files; never runs agents."""
