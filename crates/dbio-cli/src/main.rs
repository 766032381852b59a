fn main() {
    std::process::exit(i32::from(dbio_cli::main_with_args(std::env::args_os())));
}
