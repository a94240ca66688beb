package main

import "github.com/urfave/cli/v2"

// slicesCommand is being written; this placeholder keeps the tree building meanwhile.
func slicesCommand() *cli.Command {
	return &cli.Command{Name: "slices-placeholder", Hidden: true}
}
