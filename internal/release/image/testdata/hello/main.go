// Command hello stands in for pitstop in the image tests: a small static
// binary that builds in seconds for any architecture.
package main

import "fmt"

func main() {
	fmt.Println("hello from the pitstop image tests")
}
