# The project's own test suite uses pytester to run the plugin in throw-away projects.
pytest_plugins = ["pytester"]

# The Spark checker (issue 5) is still being wired in: its tests join the suite with it.
collect_ignore = ["tests/analysis"]
