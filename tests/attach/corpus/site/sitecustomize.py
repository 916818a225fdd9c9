# The job's own sitecustomize (bad_own_hooks.py puts this folder on its
# PYTHONPATH): it must still run under liveprof run, after liveprof's.
import os

os.environ["CORPUS_OWN_SITECUSTOMIZE"] = "ran"
