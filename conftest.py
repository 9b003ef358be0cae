# The project's own test suite uses pytester to run the plugin in throw-away projects.
pytest_plugins = ["pytester"]

# Groundwork for the real cluster (issue 3), the FUSE layer (issue 4) and the Spark checker
# (issue 5) landed with its own tests, which need Docker images, FUSE libraries and PySpark that
# the set-up does not install yet. They join the suite when those issues wire them in; until
# then they are not collected (not skipped: they are simply not part of this suite).
collect_ignore = ["tests/sut", "tests/lazyfs", "tests/analysis"]
