info()
call("create_search", {"task": "layernorm", "name": "layernorm", "rounds": 4})
prompt("analyse_kernel", {"search": "layernorm"})
