package main

import "github.com/urfave/cli/v2"

// discoverCommand is being written; this placeholder keeps the tree building meanwhile.
func discoverCommand() *cli.Command {
	return &cli.Command{Name: "discover-placeholder", Hidden: true}
}
