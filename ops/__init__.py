"""What a platform operator runs: the per-team GPU usage report (``python -m ops.usage``), a new site from an
existing one (``python -m ops.new_site``) and the CI's matrix of sites (``python -m ops.sites matrix``)."""
