info()
call("create_search", {"task": "rmsnorm", "name": "rmsnorm", "rounds": 4})
prompt("analyse_kernel", {"search": "rmsnorm"})
