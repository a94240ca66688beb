package main

import "github.com/urfave/cli/v2"

// mockNodeCommand is being written; this placeholder keeps the tree building meanwhile.
func mockNodeCommand() *cli.Command {
	return &cli.Command{Name: "mocknode-placeholder", Hidden: true}
}
