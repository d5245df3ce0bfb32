package codemode.authz

import rego.v1

# Readers may look, admins may do everything except stop a production instance.

reads := {
	"sandboxes.list", "instances.list", "instances.get",
	"instances.search", "owners.get", "owners.list",
}

default allow := false

allow if {
	"reader" in data.roles[input.subject.id]
	input.capability.id in reads
}

allow if {
	"admin" in data.roles[input.subject.id]
	not stops_prod
}

stops_prod if {
	input.capability.id == "instances.set_state"
	input.arguments.sandbox == "prod"
	input.arguments.state == "stopped"
}

# What a subject may ever call, whatever the arguments (for --hide-forbidden).

default visible := false

visible if "admin" in data.roles[input.subject.id]

visible if {
	"reader" in data.roles[input.subject.id]
	input.capability.id in reads
}
