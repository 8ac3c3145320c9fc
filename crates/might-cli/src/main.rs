fn main() {
    println!("might");
}
