info()
call("create_search", {"task": "/tmp/ksearch-tasks/log_softmax.py", "name": "log_softmax", "rounds": 4})
prompt("analyse_kernel", {"search": "log_softmax"})
