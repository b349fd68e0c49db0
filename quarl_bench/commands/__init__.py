"""``quarl-bench`` commands: one function per command, each taking the parsed arguments, calling the application
layer (``quarl_bench.api``) and rendering what it returns through ``report.console``; grouped as the parsers are
(``parsers/``). Each subparser names its function as ``handler=``."""
