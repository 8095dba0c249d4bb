info()
call("create_search", {"task": "softmax", "name": "softmax", "rounds": 4})
prompt("analyse_kernel", {"search": "softmax"})
